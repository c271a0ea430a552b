import { LabIcon } from '@jupyterlab/ui-components';

import vramscopeSvg from '../style/icons/vramscope.svg';

export const vramscopeIcon = new LabIcon({
  name: 'jupyterlab-vramscope:memory',
  svgstr: vramscopeSvg
});
