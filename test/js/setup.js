// jsdom lacks a few browser APIs that @lumino and plotly touch at import time.
const util = require('util');
if (typeof globalThis.TextEncoder === 'undefined') {
  globalThis.TextEncoder = util.TextEncoder;
  globalThis.TextDecoder = util.TextDecoder;
}
if (typeof globalThis.DragEvent === 'undefined') {
  globalThis.DragEvent = class DragEvent extends Event {};
}
class NoopObserver {
  observe() {}
  unobserve() {}
  disconnect() {}
  takeRecords() {
    return [];
  }
}
globalThis.ResizeObserver = globalThis.ResizeObserver || NoopObserver;
globalThis.IntersectionObserver =
  globalThis.IntersectionObserver || NoopObserver;
if (!window.matchMedia) {
  window.matchMedia = () => ({
    matches: false,
    addListener() {},
    removeListener() {},
    addEventListener() {},
    removeEventListener() {},
    dispatchEvent: () => false
  });
}
window.scrollTo = window.scrollTo || (() => undefined);
if (!window.URL.createObjectURL) {
  window.URL.createObjectURL = () => 'blob:stub';
}
HTMLCanvasElement.prototype.getContext = () => null;

// JupyterLab's ReactWidget (ToolbarButton in the panes' headers) renders in an idle callback.
if (typeof globalThis.requestIdleCallback === 'undefined') {
  globalThis.requestIdleCallback = cb =>
    setTimeout(() => cb({ didTimeout: false, timeRemaining: () => 50 }), 0);
  globalThis.cancelIdleCallback = id => clearTimeout(id);
}
