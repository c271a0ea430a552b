import { ISignal } from '@lumino/signaling';

import { formatBytes, percentOf } from '../format';
import { IDeviceInfo, ISampleValues } from '../protocol';
import { IMemorySession, IMemoryTracker } from '../tokens';
import { h, SessionView } from './base';

/**
 * One `.vramscope-Device[data-device-id]` per device: name, used / capacity with a bar
 * (live from the newest sample when there is one), reserved where known.
 */
export class DevicesView extends SessionView {
  constructor(tracker: IMemoryTracker) {
    super(tracker);
    this.addClass('vramscope-Devices');
    this.update();
  }

  protected signalsOf(
    session: IMemorySession
  ): ISignal<IMemorySession, unknown>[] {
    return [
      session.devicesChanged,
      session.samplesAdded,
      session.statusChanged
    ];
  }

  protected render(session: IMemorySession | null): void {
    this.node.textContent = '';
    const devices = session?.devices ?? [];
    if (!devices.length) {
      this.node.appendChild(
        h('p', 'vramscope-Devices-empty', 'No devices reported yet.')
      );
      return;
    }
    const samples = session!.samples;
    const last = samples.length ? samples.get(samples.length - 1) : null;
    for (const device of devices) {
      this.node.appendChild(this._renderDevice(device, last?.d[device.id]));
    }
  }

  private _renderDevice(
    device: IDeviceInfo,
    live: ISampleValues | undefined
  ): HTMLElement {
    const units = this.tracker.settings.units;
    const used = live?.used ?? device.used_bytes;
    const reserved = live?.reserved ?? device.reserved_bytes;
    const total = device.total_bytes;
    const el = h('div', 'vramscope-Device', undefined, {
      'data-device-id': device.id,
      'data-kind': device.kind
    });
    const head = h('div', 'vramscope-Device-head');
    head.appendChild(h('span', 'vramscope-Device-id', device.id));
    head.appendChild(
      h('span', 'vramscope-Device-name', device.name, { title: device.name })
    );
    el.appendChild(head);

    const pct = percentOf(used, total);
    const bar = h('div', 'vramscope-Device-bar', undefined, {
      role: 'meter',
      'aria-valuemin': '0',
      'aria-valuemax': '100',
      'aria-valuenow': pct === null ? '0' : pct.toFixed(1),
      'aria-label': `${device.id} memory in use`
    });
    const rpct = reserved === null ? null : percentOf(reserved, total);
    if (rpct !== null) {
      const r = h('div', 'vramscope-Device-barReserved');
      r.style.width = `${rpct}%`;
      bar.appendChild(r);
    }
    const fill = h('div', 'vramscope-Device-barFill');
    fill.style.width = `${pct ?? 0}%`;
    bar.appendChild(fill);
    if (pct !== null) {
      el.appendChild(bar);
    }

    const fmt = (b: number) => formatBytes(b, { units });
    const usage =
      total === null
        ? `${fmt(used)} used`
        : `${fmt(used)} / ${fmt(total)} (${(pct ?? 0).toFixed(1)}%)`;
    const parts = [usage];
    if (reserved !== null) {
      parts.push(
        `${device.kind === 'cpu' ? 'RSS' : 'reserved'} ${fmt(reserved)}`
      );
    }
    if (!device.initialized) {
      parts.push('not initialized');
    }
    const line = h('div', 'vramscope-Device-usage', undefined, {
      title: `measured by ${device.source}`
    });
    parts.forEach((part, i) => {
      line.append(i ? ' · ' : '', h('span', 'vramscope-Device-part', part));
    });
    el.appendChild(line);
    return el;
  }
}
