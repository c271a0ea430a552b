/**
 * The `widget` plugin: registers `vramscope.widget()`'s model and view with the ipywidgets
 * manager (`IJupyterWidgetRegistry`). `@jupyter-widgets/base` is a shared singleton provided
 * by jupyterlab_widgets; it is loaded only here, lazily, so the rest of vramscope works when
 * ipywidgets' JupyterLab extension is not installed.
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';

import { IMemoryTracker } from '../tokens';

export const widgetPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyterlab-vramscope:widget',
  description:
    'The inline widget of vramscope.widget(): a live memory chart with cell bands in cell output.',
  autoStart: true,
  requires: [IMemoryTracker],
  // Activation waits for the registration: JupyterLab restores the open notebooks (and the
  // widget manager their widgets, from the kernel) only once every plugin has activated.
  activate: (app: JupyterFrontEnd, tracker: IMemoryTracker): Promise<void> =>
    Promise.all([import('@jupyter-widgets/base'), import('./widget')])
      .then(async ([base, widget]) => {
        const registry = await app.resolveOptionalService(
          base.IJupyterWidgetRegistry
        );
        if (!registry) {
          console.warn(
            'vramscope: no Jupyter widget manager; vramscope.widget() cannot be shown'
          );
          return;
        }
        registry.registerWidget({
          name: widget.WIDGET_MODULE,
          version: widget.WIDGET_MODULE_VERSION,
          exports: () => widget.widgetExports(tracker)
        });
      })
      .catch(reason =>
        console.warn(
          'vramscope: ipywidgets is not available in this JupyterLab; vramscope.widget() cannot be shown',
          reason
        )
      )
};
