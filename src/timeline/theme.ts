/**
 * The timeline's colours and fonts, read from the `--jp-*` CSS variables (so dark themes
 * work), and the style of each memory line.
 */
import type { ITraceSpec } from './series';

export interface ITheme {
  background: string;
  text: string;
  muted: string;
  grid: string;
  font: string;
  primary: string;
  secondary: string;
  peak: string;
  device: string;
  band: string;
  warn: string;
  error: string;
}

export function readTheme(node: HTMLElement): ITheme {
  const style = getComputedStyle(node);
  const v = (name: string, fallback: string) =>
    style.getPropertyValue(name).trim() || fallback;
  return {
    background: v('--jp-layout-color1', '#ffffff'),
    text: v('--jp-ui-font-color1', '#212121'),
    muted: v('--jp-ui-font-color2', '#616161'),
    grid: v('--jp-border-color2', '#e0e0e0'),
    font: v('--jp-ui-font-family', 'system-ui, sans-serif'),
    primary: v('--jp-brand-color1', '#1976d2'),
    secondary: v('--jp-warn-color1', '#f57c00'),
    peak: v('--jp-error-color1', '#d32f2f'),
    device: v('--jp-ui-font-color2', '#616161'),
    band: v('--jp-layout-color3', '#bdbdbd'),
    warn: v('--jp-warn-color0', '#e65100'),
    error: v('--jp-error-color1', '#d32f2f')
  };
}

export interface ILineStyle {
  color: string;
  width: number;
  dash?: 'dot' | 'dash';
}

export function lineStyle(spec: ITraceSpec, theme: ITheme): ILineStyle {
  switch (spec.role) {
    case 'primary':
      return { color: theme.primary, width: 2 };
    case 'secondary':
      return { color: theme.secondary, width: 1.5 };
    case 'peak':
      return { color: theme.peak, width: 1, dash: 'dot' };
    default:
      return { color: theme.device, width: 1, dash: 'dash' };
  }
}
