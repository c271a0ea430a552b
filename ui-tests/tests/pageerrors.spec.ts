/**
 * The specs' shared `pageErrors` fixture (utils.ts): JupyterLab's own cancelled debug request
 * is left out, thrown or rejected, and every other page error is kept, so a spec that
 * expects no page errors still fails on any other.
 */
import { expect } from '@jupyterlab/galata';

import { test } from './lab';
import { JUPYTERLAB_CANCELLED_DEBUG_REQUEST } from './utils';

// a page loaded for it: it counts the page's errors, which a kept page's earlier notebooks
// could add to (a debug request cancelled as they closed)
test.use({ sharePage: false });

test("pageErrors keeps every page error but JupyterLab's cancelled debug request", async ({
  page,
  pageErrors
}) => {
  await page.evaluate(message => {
    setTimeout(() => {
      throw new Error(message);
    });
    setTimeout(() => void Promise.reject(new Error(message)));
    setTimeout(() => void Promise.reject(new Error(`${message}!`)));
    setTimeout(() => {
      throw new Error('Canceled future for execute_request message');
    });
  }, JUPYTERLAB_CANCELLED_DEBUG_REQUEST);
  await expect.poll(() => pageErrors.length).toBe(2);
  await page.waitForTimeout(500); // nothing else comes
  // a thrown error and a rejection are reported in either order
  expect([...pageErrors].sort()).toEqual([
    `Error: ${JUPYTERLAB_CANCELLED_DEBUG_REQUEST}!`,
    'Error: Canceled future for execute_request message'
  ]);
  const tolerated = test
    .info()
    .annotations.filter(a => a.type === 'tolerated page error');
  expect(tolerated).toHaveLength(2);
});
