# keygate: the API-key service as one container image.
#
#   docker build -t keygate .
#   docker run -d --name keygate -p 127.0.0.1:3000:3000 -v keygate-data:/data keygate
#
# Two stages: Bun compiles src/ into one self-contained executable, and the runtime image holds only
# that file on Debian 13 (trixie) slim (the binary links glibc, so scratch and Alpine/musl will not run
# it; docs/docker.md says why trixie-slim rather than distroless/cc). Labels come from build args:
#
#   docker build --build-arg REVISION=$(git rev-parse HEAD) \
#     --build-arg CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ) --build-arg SOURCE=<repository URL> -t keygate .
#
# See docs/docker.md; scripts/experiments/container-smoke.sh builds and exercises this file end to end.

# ---------------------------------------------------------------------------------------------------
# Build stage
# ---------------------------------------------------------------------------------------------------
# The exact Bun that CI and package.json's checks use (.ci/run pins 1.4.4): a floating 1.4 tag would
# change the compiler under an unchanged Dockerfile.
FROM docker.io/oven/bun:1.4.4 AS build
WORKDIR /src

# Dependencies first, so editing the sources does not re-run the install. --production skips the
# devDependencies (biome, drizzle-kit, types, fast-check): `bun build` needs only the runtime ones.
# console/ is a workspace of its own (the web console's front-end, with Preact): its package.json is
# part of the lockfile.
COPY package.json bun.lock ./
COPY console/package.json ./console/package.json
RUN bun install --frozen-lockfile --production

# Then the sources. drizzle/ is read at build time by src/db/migrations.macro.ts and embedded in the
# binary; package.json (copied above) gives the version string.
COPY tsconfig.json drizzle.config.ts ./
COPY drizzle ./drizzle
COPY src ./src
# The console's front-end, bundled into the binary by src/sessions/console-bundle.macro.ts.
COPY console/tsconfig.json ./console/tsconfig.json
COPY console/src ./console/src
COPY scripts/ci/build.ts ./scripts/ci/build.ts
# The build context has no .git: the commit that --version reports comes in as a build arg.
ARG REVISION=""
RUN KEYGATE_COMMIT="${REVISION:-unknown}" bun run build && ./dist/keygate --version

# ---------------------------------------------------------------------------------------------------
# Runtime stage
# ---------------------------------------------------------------------------------------------------
FROM docker.io/library/debian:trixie-slim AS runtime

# VERSION defaults to package.json's; REVISION (the commit), CREATED (RFC 3339) and SOURCE (the
# repository URL) are given by whoever builds, and stay empty rather than invented when not given.
ARG VERSION=1.0.0
ARG REVISION=""
ARG CREATED=""
ARG SOURCE=""

LABEL org.opencontainers.image.title="keygate" \
      org.opencontainers.image.description="API keys for your backend: create, verify, limit and manage them over HTTP, one self-contained binary." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.base.name="docker.io/library/debian:trixie-slim"

# A fixed, unprivileged UID/GID so a bind-mounted /data can be prepared with `chown 10001:10001`.
# No packages are installed: the binary needs only glibc, and keygate makes no outgoing TLS calls
# (so no ca-certificates), and HEALTHCHECK uses keygate itself (so no curl).
RUN groupadd --system --gid 10001 keygate \
 && useradd --system --no-log-init --uid 10001 --gid 10001 --home-dir /data --no-create-home \
      --shell /usr/sbin/nologin keygate \
 && mkdir -p /data \
 && chown 10001:10001 /data \
 && chmod 0700 /data

COPY --from=build /src/dist/keygate /usr/local/bin/keygate

# The database and, when JWT_SECRET is unset, the generated jwt-secret file live in /data.
# Migrations are embedded in the binary and applied at every start, so a new image on an old volume
# upgrades the schema by itself.
ENV DATABASE_URL=/data/keygate.db \
    HOST=0.0.0.0 \
    PORT=3000 \
    LOG_LEVEL=info
VOLUME /data
WORKDIR /data
USER 10001:10001
EXPOSE 3000

# `keygate healthcheck` GETs /health on the PORT/HOST/BASE_PATH the server uses and exits 0 on 200.
# (Podman keeps HEALTHCHECK only with `podman build --format docker`.)
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["keygate", "healthcheck"]

# keygate drains in-flight requests, closes the database and exits 0 on SIGTERM, also as PID 1.
STOPSIGNAL SIGTERM
ENTRYPOINT ["keygate"]
CMD ["serve"]
