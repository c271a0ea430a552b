/**
 * IopubComm and BridgeComms on a kernel connection that does not handle comms (the second
 * connection to a kernel in a page): messages go out as shell `comm_*` messages and only this
 * comm's `comm_msg` / `comm_close` are taken from iopub.
 */
import { Signal } from '@lumino/signaling';

import { BridgeComms } from '../../src/model/comms';
import { IopubComm } from '../../src/model/iopubcomm';
import { COMM_TARGET, PROTOCOL_VERSION } from '../../src/protocol';

/** The parts of a kernel connection with `handleComms` false that IopubComm uses. */
class NoCommsKernel {
  handleComms = false;
  isDisposed = false;
  username = 'me';
  clientId = 'client-1';
  connectionStatus = 'connected';
  status = 'idle';
  iopubMessage = new Signal<NoCommsKernel, any>(this);
  disposed = new Signal<NoCommsKernel, void>(this);
  shell: any[] = [];
  createComm(): never {
    throw new Error('Comms are disabled on this kernel connection');
  }
  sendShellMessage(msg: any): void {
    this.shell.push(msg);
  }
  /** A message the kernel published on iopub. */
  publish(msgType: string, content: unknown): void {
    this.iopubMessage.emit({
      header: { msg_type: msgType, msg_id: `m${this.shell.length}` },
      parent_header: {},
      metadata: {},
      content
    });
  }
  dispose(): void {
    this.isDisposed = true;
    this.disposed.emit();
  }
}

describe('IopubComm', () => {
  it('sends comm_open, comm_msg and comm_close on shell with its id', () => {
    const kernel = new NoCommsKernel();
    const comm = new IopubComm(kernel as any, COMM_TARGET);
    comm.open({ channel: 'control' }, { protocol_version: '1.1.0' });
    comm.send({ method: 'hello' });
    comm.close();
    expect(kernel.shell.map(m => m.header.msg_type)).toEqual([
      'comm_open',
      'comm_msg',
      'comm_close'
    ]);
    const [open, msg] = kernel.shell;
    expect(open.channel).toBe('shell');
    expect(open.header.session).toBe('client-1');
    expect(open.content).toEqual({
      comm_id: comm.commId,
      target_name: COMM_TARGET,
      data: { channel: 'control' }
    });
    expect(open.metadata).toEqual({ protocol_version: '1.1.0' });
    expect(msg.content).toEqual({
      comm_id: comm.commId,
      data: { method: 'hello' }
    });
    expect(comm.isDisposed).toBe(true);
    expect(() => comm.send({})).toThrow(/disposed/);
  });

  it("takes only its own comm's messages from iopub, and its close", () => {
    const kernel = new NoCommsKernel();
    const comm = new IopubComm(kernel as any, COMM_TARGET);
    const got: unknown[] = [];
    const closed: unknown[] = [];
    comm.onMsg = m => void got.push(m.content.data);
    comm.onClose = m => void closed.push(m.content.comm_id);
    kernel.publish('comm_msg', { comm_id: 'other', data: { a: 1 } });
    kernel.publish('stream', { name: 'stdout', text: 'x' });
    kernel.publish('comm_msg', { comm_id: comm.commId, data: { b: 2 } });
    kernel.publish('comm_close', { comm_id: 'other', data: {} });
    expect(got).toEqual([{ b: 2 }]);
    expect(closed).toEqual([]);
    kernel.publish('comm_close', { comm_id: comm.commId, data: {} });
    expect(closed).toEqual([comm.commId]);
    expect(comm.isDisposed).toBe(true);
    kernel.publish('comm_msg', { comm_id: comm.commId, data: { c: 3 } });
    expect(got).toEqual([{ b: 2 }]);
  });

  it('is disposed with its kernel connection', () => {
    const kernel = new NoCommsKernel();
    const comm = new IopubComm(kernel as any, COMM_TARGET);
    kernel.dispose();
    expect(comm.isDisposed).toBe(true);
  });
});

describe('BridgeComms on a connection without comms', () => {
  it('opens both channels by hand and passes their messages on', () => {
    const kernel = new NoCommsKernel();
    const received: unknown[] = [];
    const comms = new BridgeComms({
      onMessage: data => received.push(data),
      onClosed: () => received.push('closed')
    });
    const send = comms.open(kernel as any, () => true);
    const opens = kernel.shell.filter(m => m.header.msg_type === 'comm_open');
    expect(opens.map(m => m.content.data.channel)).toEqual([
      'control',
      'stream'
    ]);
    expect(opens[0].metadata).toEqual({ protocol_version: PROTOCOL_VERSION });
    const [control, stream] = opens.map(m => m.content.comm_id);
    send({
      kind: 'request',
      id: 'r1',
      method: 'get_history',
      params: {}
    } as any);
    const sent = kernel.shell[kernel.shell.length - 1];
    expect(sent.header.msg_type).toBe('comm_msg');
    expect(sent.content.comm_id).toBe(control);
    kernel.publish('comm_msg', { comm_id: stream, data: { type: 'hello' } });
    kernel.publish('comm_close', { comm_id: stream, data: {} });
    expect(received).toEqual([{ type: 'hello' }, 'closed']);
    comms.close(kernel as any);
    const closes = kernel.shell.filter(m => m.header.msg_type === 'comm_close');
    expect(closes.map(m => m.content.comm_id)).toEqual([control]);
  });
});
