import { expect } from '@jupyterlab/galata';

import { test } from './lab';
import { panelBuilt } from './utils';

/**
 * JupyterLab starts from the venv and the prebuilt vramscope labextension is loaded and its
 * plugins activated (no JupyterLab rebuild involved).
 */
test('JupyterLab loads with the vramscope extension activated', async ({
  page,
  pageErrors
}) => {
  await expect(page.locator('#jp-main-dock-panel')).toBeVisible();

  const plugins = await page.evaluate(() => {
    const app = (window as any).jupyterapp;
    return app
      .listPlugins()
      .filter((id: string) => id.startsWith('jupyterlab-vramscope:'))
      .map((id: string) => ({ id, activated: app.isPluginActivated(id) }));
  });
  expect(plugins.length).toBeGreaterThan(0);
  for (const plugin of plugins) {
    expect(plugin, `${plugin.id} activated`).toEqual({
      id: plugin.id,
      activated: true
    });
  }
  expect(pageErrors.filter(e => /vramscope/i.test(e))).toEqual([]);

  if (panelBuilt()) {
    // The memory panel is in the right sidebar.
    await expect(
      page.locator('.jp-SideBar.jp-mod-right [data-id="vramscope-panel"]')
    ).toBeAttached();
  }
});
