export * from './base';
export * from './celltable';
export * from './devices';
export * from './panel';
export * from './status';
