/**
 * Lazy plotly loader: the basic bundle (scatter, bar, pie) is fetched on first use only, so
 * JupyterLab's start-up does not pay for it. Elsewhere plotly is imported as a type only.
 */
import type * as PlotlyType from 'plotly.js';

export type PlotlyModule = typeof PlotlyType;

/** A plot's root element as plotly augments it (event emitter methods). */
export interface IPlotElement extends HTMLElement {
  on(event: string, handler: (data: any) => void): void;
  removeAllListeners?(event?: string): void;
  data?: unknown[];
  layout?: Record<string, unknown>;
}

let loading: Promise<PlotlyModule> | null = null;

/** Load plotly once (concurrent callers share the same promise). */
export function loadPlotly(): Promise<PlotlyModule> {
  if (!loading) {
    loading = import('plotly.js-basic-dist-min').then(
      mod => ((mod as any).default ?? mod) as PlotlyModule
    );
    loading.catch(() => {
      loading = null;
    });
  }
  return loading;
}
