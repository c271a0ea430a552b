export * from './manager';
export * from './metadata';
export * from './text';
export * from './widget';
