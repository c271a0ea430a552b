import { validateKernelMessage, validateCellRecord } from '../../src/validate';
import {
  device,
  hello,
  insight as makeInsight,
  MIB,
  record,
  settings
} from './fixtures';

function expectError(raw: unknown, fragment: string): void {
  const result = validateKernelMessage(raw);
  expect(typeof result).toBe('string');
  expect(result as string).toContain(fragment);
}

describe('validateKernelMessage: accepts protocol v1 messages', () => {
  const good: { [name: string]: unknown } = {
    hello: hello({ cells: [record()], warnings: ['torch is not installed'] }),
    cell: { type: 'cell', record: record(), devices: [device()] },
    samples: {
      type: 'samples',
      samples: [
        { t: 1.5, d: { cpu: { used: 10, reserved: 20 } } },
        {
          t: 1.6,
          d: {
            'cuda:0': {
              used: 1,
              reserved: 2,
              peak: 3,
              device_used: 4,
              device_total: 5
            }
          }
        }
      ],
      dropped: 0
    },
    devices: {
      type: 'devices',
      devices: [
        device(),
        device({
          id: 'cuda:0',
          kind: 'cuda',
          total_bytes: null,
          reserved_bytes: null
        })
      ]
    },
    insight: {
      type: 'insight',
      insight: {
        model: 'model',
        models: [{ name: 'model', type: 'Sequential', param_bytes: 4096 }],
        layers: [
          {
            path: 'encoder.0',
            type: 'Linear',
            saved_bytes: 1024,
            peak_saved_bytes: 2048,
            output_shape: [8, 128],
            param_bytes: 4096,
            grad_bytes: 0
          }
        ],
        breakdown: {
          cpu: {
            total_bytes: 100,
            parameters: 40,
            gradients: 0,
            optimizer_state: 0,
            activations: 50,
            other: 10
          }
        },
        holders: [
          {
            name: '_',
            kind: 'output cache',
            bytes: 8,
            explanation: 'e',
            fix: 'f'
          }
        ],
        scan_ms: 1.5,
        skipped: null
      }
    },
    notice: {
      type: 'notice',
      level: 'warning',
      message: 'insight scan skipped'
    },
    error: {
      type: 'error',
      code: 'unknown_method',
      message: 'nope',
      in_reply_to: 'vs-1'
    },
    reply: { type: 'reply', id: 'vs-1', ok: true, result: { devices: [] } }
  };

  for (const [name, msg] of Object.entries(good)) {
    it(`accepts ${name}`, () => {
      const result = validateKernelMessage(msg);
      expect(typeof result).not.toBe('string');
      expect((result as { type: string }).type).toBe(name);
    });
  }

  it('ignores unknown extra fields', () => {
    const msg = {
      ...hello(),
      future_field: [1, 2, 3],
      kernel: { ...hello().kernel, gpu: 'x' }
    };
    expect(typeof validateKernelMessage(msg)).toBe('object');
  });

  it('accepts a devices message with the current warnings', () => {
    const msg = { type: 'devices', devices: [device()], warnings: ['w'] };
    expect(validateKernelMessage(msg)).toEqual(msg);
    expect(
      typeof validateKernelMessage({
        type: 'devices',
        devices: [],
        warnings: []
      })
    ).toBe('object');
  });

  it('accepts a negative delta (memory freed)', () => {
    const r = record();
    r.devices.cpu = {
      before_bytes: 2 * MIB,
      after_bytes: MIB,
      delta_bytes: -MIB,
      peak_delta_bytes: 0
    };
    expect(
      typeof validateKernelMessage({ type: 'cell', record: r, devices: [] })
    ).toBe('object');
  });
});

describe('validateKernelMessage: rejects malformed messages', () => {
  it.each([
    [null, 'expected an object'],
    [[1, 2], 'expected an object'],
    ['hello', 'expected an object'],
    [{}, 'message.type'],
    [{ type: 7 }, 'message.type'],
    [{ type: 'bogus' }, 'unknown type "bogus"']
  ])('rejects %p', (raw, fragment) => expectError(raw, fragment));

  it('rejects a missing field', () => {
    const msg: any = hello();
    delete msg.session_id;
    expectError(msg, 'hello.session_id: missing');
  });

  it('accepts hello with the last insight and rejects a malformed one (since 1.1)', () => {
    expect(
      typeof validateKernelMessage(hello({ insight: makeInsight() }))
    ).toBe('object');
    expectError({ ...hello(), insight: { models: 'x' } }, 'hello.insight');
  });

  it('accepts Breakdown.other_tensors and rejects a negative one (since 1.1)', () => {
    const cpu = {
      total_bytes: 100,
      parameters: 10,
      gradients: 0,
      optimizer_state: 0,
      activations: 0,
      other: 90,
      other_tensors: 64
    };
    const msg = (b: object) => ({
      type: 'insight',
      insight: makeInsight({ breakdown: { cpu: b as any } })
    });
    expect(typeof validateKernelMessage(msg(cpu))).toBe('object');
    expectError(msg({ ...cpu, other_tensors: -1 }), 'other_tensors');
  });

  it('rejects a wrong field type', () => {
    expectError(
      { ...hello(), warnings: 'x' },
      'hello.warnings: expected an array'
    );
    expectError(
      { ...hello(), cells: [{ ...record(), ok: 'yes' }] },
      'hello.cells[0].ok'
    );
  });

  it('rejects bad devices warnings and insight models', () => {
    expectError(
      { type: 'devices', devices: [], warnings: 'w' },
      'devices.warnings: expected an array'
    );
    expectError(
      { type: 'devices', devices: [], warnings: [1] },
      'devices.warnings[0]'
    );
    const insight = makeInsight();
    const noModels: Partial<typeof insight> = { ...insight };
    delete noModels.models;
    expectError(
      { type: 'insight', insight: noModels },
      'insight.insight.models: missing'
    );
    expectError(
      {
        type: 'insight',
        insight: { ...insight, models: [{ name: 'm', type: 'T' }] }
      },
      'insight.insight.models[0].param_bytes: missing'
    );
    expectError(
      {
        type: 'insight',
        insight: {
          ...insight,
          models: [{ name: 'm', type: 'T', param_bytes: -1 }]
        }
      },
      'models[0].param_bytes'
    );
    expectError(
      {
        type: 'insight',
        insight: {
          ...insight,
          models: [{ name: 3, type: 'T', param_bytes: 0 }]
        }
      },
      'models[0].name'
    );
  });

  it('rejects non-finite numbers', () => {
    expectError(
      { type: 'cell', record: record({ duration: NaN }), devices: [] },
      'duration'
    );
    expectError(
      { type: 'samples', samples: [{ t: Infinity, d: {} }], dropped: 0 },
      'samples.samples[0].t'
    );
  });

  it('rejects non-integer and negative byte counts', () => {
    expectError(
      { type: 'devices', devices: [device({ used_bytes: 1.5 })] },
      'used_bytes'
    );
    expectError(
      { type: 'devices', devices: [device({ total_bytes: -1 })] },
      'total_bytes'
    );
    const r = record();
    r.devices.cpu.peak_delta_bytes = -5;
    expectError(
      { type: 'cell', record: r, devices: [] },
      'record.devices.cpu.peak_delta_bytes'
    );
  });

  it('rejects bad enums and literals', () => {
    expectError(
      { type: 'devices', devices: [device({ kind: 'tpu' as any })] },
      'kind'
    );
    expectError({ type: 'notice', level: 'error', message: 'm' }, 'level');
    expectError(
      { type: 'error', code: 'oops', message: 'm', in_reply_to: null },
      'code'
    );
    expectError(
      { type: 'reply', id: 'vs-1', ok: false, result: 1 },
      'reply.ok'
    );
    expectError(
      { ...hello(), settings: settings({ cuda_peak_policy: 'x' as any }) },
      'cuda_peak_policy'
    );
    expectError(
      { ...hello(), settings: settings({ cpu_peak: 'fast' as any }) },
      'cpu_peak'
    );
    expect(
      typeof validateKernelMessage({
        ...hello(),
        settings: settings({ cpu_peak: 'exact' })
      })
    ).toBe('object');
  });

  it('takes a sample that lists the devices not read (unread, since 1.1) and checks it', () => {
    const msg = {
      type: 'samples',
      samples: [{ t: 1, d: {}, unread: ['cpu'] }],
      dropped: 0
    };
    expect(validateKernelMessage(msg)).toEqual(msg);
    expectError(
      {
        type: 'samples',
        samples: [{ t: 1, d: {}, unread: 'cpu' }],
        dropped: 0
      },
      'samples.samples[0].unread'
    );
    expectError(
      { type: 'samples', samples: [{ t: 1, d: {}, unread: [3] }], dropped: 0 },
      'samples.samples[0].unread[0]'
    );
  });

  it('rejects a reply without a result and a sample value without used', () => {
    expectError(
      { type: 'reply', id: 'vs-1', ok: true },
      'reply.result: missing'
    );
    expectError(
      {
        type: 'samples',
        samples: [{ t: 1, d: { cpu: { reserved: 1 } } }],
        dropped: 0
      },
      'samples.samples[0].d.cpu.used: missing'
    );
  });

  it('never throws, even on hostile input', () => {
    const hostile = {
      get type(): string {
        throw new Error('boom');
      }
    };
    expect(() => validateKernelMessage(hostile)).not.toThrow();
    expect(typeof validateKernelMessage(hostile)).toBe('string');
  });

  it('validateCellRecord checks a lone record', () => {
    expect(validateCellRecord(record())).toEqual(record());
    expect(validateCellRecord({ ...record(), execution_count: 1.5 })).toContain(
      'execution_count'
    );
  });
});
