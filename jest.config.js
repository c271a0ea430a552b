// Jest runs the front-end unit tests under jsdom; @jupyterlab/@lumino ship ESM, so let them
// through the transform (the list mirrors the JupyterLab extension template).
const esModules = [
  '@codemirror',
  '@jupyter',
  '@jupyterlab',
  '@jupyter-widgets',
  '@lumino',
  '@microsoft',
  'exenv-es6',
  'lib0',
  'nanoid',
  'vscode-ws-jsonrpc',
  'y-protocols',
  'y-websocket',
  'yjs',
  'marked',
  'delaunator',
  'robust-predicates',
  'internmap',
  'khroma',
  'lodash-es',
  'd3',
  'mermaid'
].join('|');

module.exports = {
  testEnvironment: 'jsdom',
  roots: ['<rootDir>/test/js'],
  testMatch: ['**/*.spec.ts'],
  setupFiles: ['<rootDir>/test/js/setup.js'],
  moduleNameMapper: {
    '\\.(css|less|sass|scss)$': '<rootDir>/test/js/styleMock.js',
    '\\.svg$': '<rootDir>/test/js/svgMock.js'
  },
  transform: {
    '^.+\\.tsx?$': ['ts-jest', { tsconfig: 'tsconfig.test.json' }],
    '^.+\\.jsx?$': ['ts-jest', { tsconfig: 'tsconfig.test.json' }]
  },
  transformIgnorePatterns: [`/node_modules/(?!(${esModules}))`],
  modulePathIgnorePatterns: [
    '<rootDir>/python_bridge/vramscope/labextension',
    '<rootDir>/lib'
  ]
};
