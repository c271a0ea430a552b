import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyterlab-vramscope:plugin',
  description: 'PyTorch memory per cell, live.',
  autoStart: true,
  activate: (app: JupyterFrontEnd) => {
    console.log('vramscope activated');
  }
};

export default plugin;
