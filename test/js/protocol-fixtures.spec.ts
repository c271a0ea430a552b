/**
 * The two sides agree on the protocol: one real message of every kernel -> front-end type,
 * captured from a real kernel by test/python/make_protocol_fixtures.py, passes the front
 * end's validator, and each type the TypeScript union names is in the capture.
 */
import * as fs from 'fs';
import * as path from 'path';

import { validateKernelMessage } from '../../src/validate';

const FILE = path.join(__dirname, '..', 'fixtures', 'kernel-messages.json');
const captured: Record<string, unknown> = JSON.parse(
  fs.readFileSync(FILE, 'utf8')
);

/** Every `type` of the KernelMessage union in src/protocol.ts (feature messages in src/messages/). */
function unionTypes(): string[] {
  const srcDir = path.join(__dirname, '..', '..', 'src');
  const messagesDir = path.join(srcDir, 'messages');
  const src = [
    path.join(srcDir, 'protocol.ts'),
    ...fs.readdirSync(messagesDir).map(f => path.join(messagesDir, f))
  ]
    .map(f => fs.readFileSync(f, 'utf8'))
    .join('\n');
  const union = src.split('export type KernelMessage =')[1].split(';')[0];
  const names = union.match(/I\w+Message/g) ?? [];
  return names.map(name => {
    const body = src.split(`export interface ${name}`)[1];
    return /type: '(\w+)'/.exec(body)![1];
  });
}

describe('kernel messages captured from a real kernel', () => {
  it('cover every type of the TypeScript union', () => {
    const types = unionTypes();
    expect(types.length).toBeGreaterThanOrEqual(8);
    expect(Object.keys(captured).sort()).toEqual([...types].sort());
  });

  it.each(Object.keys(captured))('%s passes the front end validator', type => {
    const msg = validateKernelMessage(captured[type]);
    expect(typeof msg).not.toBe('string');
    expect((msg as { type: string }).type).toBe(type);
  });

  it.each(Object.keys(captured))('%s with a field broken is rejected', type => {
    const broken = JSON.parse(JSON.stringify(captured[type]));
    const key = Object.keys(broken).find(k => k !== 'type')!;
    broken[key] = { not: 'what the protocol says' };
    expect(typeof validateKernelMessage(broken)).toBe('string');
  });
});
