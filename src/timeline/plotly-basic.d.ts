// plotly.js-basic-dist-min ships no types; it exposes the plotly.js API (scatter, bar, pie).
declare module 'plotly.js-basic-dist-min' {
  import * as Plotly from 'plotly.js';
  export = Plotly;
}
