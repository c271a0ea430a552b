/**
 * The ipywidgets model and view of `vramscope.widget()`. The model syncs only display
 * choices (device, window, height); the view finds the notebook's `IMemorySession` through
 * the `IMemoryTracker` (by the widget manager's notebook path) and draws a `MemoryChart`
 * from it. After a page reload the widget manager restores the model from the kernel and the
 * view finds the session again. Clearing the output removes the view: the chart disconnects
 * from the session and releases its canvases.
 */
import { DOMWidgetModel, DOMWidgetView } from '@jupyter-widgets/base';

import type { IMemorySession, IMemoryTracker } from '../tokens';
import { MemoryChart } from './chart';

/** The widget module's name and version (a protocol of its own, as ipywidgets does). */
export const WIDGET_MODULE = 'jupyterlab-vramscope';
export const WIDGET_MODULE_VERSION = '1.0.0';

/** The model and view classes, bound to the tracker the views look sessions up in. */
export function widgetExports(tracker: IMemoryTracker): {
  MemoryWidgetModel: typeof DOMWidgetModel;
  MemoryWidgetView: typeof DOMWidgetView;
} {
  class MemoryWidgetModel extends DOMWidgetModel {
    defaults(): any {
      return {
        ...super.defaults(),
        _model_name: 'MemoryWidgetModel',
        _model_module: WIDGET_MODULE,
        _model_module_version: WIDGET_MODULE_VERSION,
        _view_name: 'MemoryWidgetView',
        _view_module: WIDGET_MODULE,
        _view_module_version: WIDGET_MODULE_VERSION,
        device: '',
        window: 60,
        height: 120
      };
    }
  }

  class MemoryWidgetView extends DOMWidgetView {
    render(): void {
      this.el.classList.add('vramscope-WidgetView');
      this.chart = new MemoryChart({
        ...this._display(),
        findSession: () => this._findSession(),
        sessionAdded: tracker.sessionAdded,
        units: () => tracker.settings.units
      });
      this.el.appendChild(this.chart.node);
      this.listenTo(this.model, 'change', () =>
        this.chart?.setOptions(this._display())
      );
    }

    remove(): any {
      this.chart?.dispose();
      this.chart = null;
      return super.remove();
    }

    chart: MemoryChart | null = null;

    private _display(): MemoryChart.IDisplay {
      const num = (key: string, fallback: number) => {
        const value = Number(this.model.get(key));
        return Number.isFinite(value) && value > 0 ? value : fallback;
      };
      return {
        device: String(this.model.get('device') ?? ''),
        window: num('window', 60),
        height: num('height', 120)
      };
    }

    /** The session of the notebook this output is in (the widget manager's document). */
    private _findSession(): IMemorySession | null {
      const manager = this.model.widget_manager as unknown as {
        context?: { path?: string };
      };
      const path = manager.context?.path;
      return path ? tracker.sessionFor(path) : null;
    }
  }

  return { MemoryWidgetModel, MemoryWidgetView };
}
