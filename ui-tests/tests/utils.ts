import * as fs from 'fs';
import * as path from 'path';

export const ROOT = path.resolve(__dirname, '..', '..');

/** Whether the served (freshly built) front end contains the vramscope panel. */
export function panelBuilt(): boolean {
  const dir = path.join(
    ROOT,
    'python_bridge',
    'vramscope',
    'labextension',
    'static'
  );
  if (!fs.existsSync(dir)) {
    return false;
  }
  return fs
    .readdirSync(dir)
    .filter(f => f.endsWith('.js'))
    .some(f =>
      fs.readFileSync(path.join(dir, f), 'utf8').includes('vramscope-panel')
    );
}

/** docs/images/<name>: the README's screenshots, rewritten by the UI tests. */
export function screenshotPath(name: string): string {
  const file = path.join(ROOT, 'docs', 'images', name);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  return file;
}
