export * from './bridge';
export * from './ringbuffer';
export * from './session';
export * from './settings';
export * from './tracker';
