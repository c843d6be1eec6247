// The time source, passed in everywhere so tests can fix or move it.
export type Clock = () => number;

export const systemClock: Clock = () => Date.now();
