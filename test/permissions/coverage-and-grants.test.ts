// What held permissions cover (`x.*` below `x.` at any depth, `*` everything, names exactly) and what
// a holder may grant (never more than it holds, and a wildcard only under a wildcard).
import { describe, expect, it } from 'bun:test';
import { firstUngranted, grants, heldPermissions, holds, narrowedWithin } from '../../src/permissions/held';

describe('what held permissions cover', () => {
  it.each([
    [['documents.*'], 'documents.read', true],
    [['documents.*'], 'documents.comments.write', true],
    [['documents.*'], 'documents', false],
    [['documents.*'], 'documentsx.read', false],
    [['documents.*'], 'Documents.read', false],
    [['documents.*'], 'documents.', true],
    [['documents.comments.*'], 'documents.comments.write', true],
    [['documents.comments.*'], 'documents.read', false],
    [['documents.comments.*'], 'documents.comments', false],
    [['documents.read'], 'documents.read', true],
    [['documents.read'], 'documents.Read', false],
    [['documents.read'], 'documents.read.all', false],
    [['documents.read'], 'documents', false],
    [['repo/x-y.*'], 'repo/x-y.push', true],
    [['a', 'b.*', 'c'], 'b.x', true],
    [['*'], 'documents', true],
    [['*'], 'anything.at.all', true],
  ])('%j covers %j: %p', (held, asked, expected) => {
    expect(holds(heldPermissions(held), asked)).toBe(expected);
  });

  it.each([[null], [undefined], [[]]])('%j covers nothing', (held) => {
    expect(holds(heldPermissions(held), 'documents.read')).toBe(false);
  });

  it('takes a token scope entry that is no permission without error: it covers only itself', () => {
    const held = heldPermissions(['openid', 'a b', 'weird*']);
    expect(holds(held, 'openid')).toBe(true);
    expect(holds(held, 'weird')).toBe(false);
  });
});

describe('what a holder may grant', () => {
  it.each([
    [['documents.*'], 'documents.*', true],
    [['documents.*'], 'documents.comments.*', true],
    [['documents.*'], 'documents.read', true],
    [['documents.*'], 'documents', false],
    [['documents.*'], 'documentsx.*', false],
    [['documents.*'], '*', false],
    [['documents.read'], 'documents.read', true],
    [['documents.read'], 'documents.*', false],
    [['documents.comments.*'], 'documents.*', false],
    [['documents.comments.*'], 'documents.comments.*', true],
    [['documents.comments.*'], 'documents.comments.x.*', true],
    [['documents', 'documents.read'], 'documents.*', false],
    [['*'], '*', true],
    [['*'], 'documents.*', true],
    [['*'], 'billing:write', true],
    [[], 'a', false],
  ])('%j may grant %j: %p', (held, granted, expected) => {
    expect(grants(heldPermissions(held), granted)).toBe(expected);
  });

  it('names the first permission it may not grant', () => {
    const held = heldPermissions(['documents.*', 'billing:read']);
    expect(firstUngranted(held, ['documents.read', 'billing:write', '*'])).toBe('billing:write');
    expect(firstUngranted(held, ['documents.comments.*', 'billing:read'])).toBeUndefined();
    expect(firstUngranted(held, [])).toBeUndefined();
  });

  it('lets a key updating itself narrow what it holds, never widen it', () => {
    expect(narrowedWithin(['documents.*', 'billing:read'], ['documents.read'])).toBeUndefined();
    expect(narrowedWithin(['documents.*'], ['documents.comments.*'])).toBeUndefined();
    expect(narrowedWithin(['documents.read'], ['documents.read', 'documents.*'])).toBe('documents.*');
    expect(narrowedWithin(['documents.*'], ['*'])).toBe('*');
  });

  it('lets a key without permissions set none', () => {
    expect(narrowedWithin(null, ['a'])).toBe('a');
    expect(narrowedWithin(undefined, ['a'])).toBe('a');
  });
});
