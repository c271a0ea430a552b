import {
  drawLines,
  ILine,
  nearestIndex,
  valuesAt
} from '../../src/timeline/lines';

function line(label: string, x: number[], y: number[]): ILine {
  return {
    label,
    color: '#123456',
    width: 2,
    dash: 'solid',
    x: Float64Array.from(x),
    y: Float64Array.from(y)
  };
}

/** A 2D context that records the path it is given. */
function recordingCanvas(): { canvas: HTMLCanvasElement; ops: string[] } {
  const ops: string[] = [];
  const ctx: any = {
    setTransform: () => undefined,
    clearRect: () => ops.push('clear'),
    beginPath: () => ops.push('begin'),
    moveTo: (x: number, y: number) => ops.push(`M${x},${y}`),
    lineTo: (x: number, y: number) => ops.push(`L${x},${y}`),
    stroke: () => ops.push('stroke'),
    setLineDash: (d: number[]) => ops.push(`dash ${d.join(' ')}`)
  };
  const canvas = document.createElement('canvas');
  canvas.getContext = (() => ctx) as any;
  return { canvas, ops };
}

describe('drawLines', () => {
  it('maps plot units onto the area and breaks the line at gaps', () => {
    const { canvas, ops } = recordingCanvas();
    const l = line('used', [0, 5, 10, 15], [0, 50, NaN, 100]);
    drawLines(canvas, [l], {
      left: 56,
      top: 10,
      width: 100,
      height: 200,
      x0: 0,
      x1: 20,
      y0: 0,
      y1: 100
    });
    expect(canvas.style.left).toBe('56px');
    expect(canvas.style.top).toBe('10px');
    expect(canvas.style.width).toBe('100px');
    // x: 0..20 -> 0..100 px; y: 0..100 -> 200..0 px (up is up); NaN lifts the pen
    expect(ops).toEqual([
      'clear',
      'begin',
      'dash ',
      'M0,200',
      'L25,100',
      'M75,0',
      'stroke'
    ]);
  });

  it('draws dotted and dashed styles', () => {
    const { canvas, ops } = recordingCanvas();
    const a = { ...line('peak', [0, 1], [1, 1]), dash: 'dot' as const };
    const b = { ...line('device', [0, 1], [1, 1]), dash: 'dash' as const };
    drawLines(canvas, [a, b], {
      left: 0,
      top: 0,
      width: 10,
      height: 10,
      x0: 0,
      x1: 1,
      y0: 0,
      y1: 2
    });
    expect(ops.filter(o => o.startsWith('dash'))).toEqual([
      'dash 2 3',
      'dash 6 4'
    ]);
  });
});

describe('nearestIndex / valuesAt', () => {
  it('finds the drawn point nearest in time', () => {
    const x = [10, 20, 30];
    expect(nearestIndex(x, 0)).toBe(0);
    expect(nearestIndex(x, 14)).toBe(0);
    expect(nearestIndex(x, 16)).toBe(1);
    expect(nearestIndex(x, 99)).toBe(2);
    expect(nearestIndex([], 5)).toBe(-1);
  });

  it('reads every line at one time', () => {
    const values = valuesAt(
      [line('a', [10, 20], [1, 2]), line('b', [15, 25], [7, 8])],
      19
    );
    expect(values.map(v => [v.label, v.x, v.y])).toEqual([
      ['a', 20, 2],
      ['b', 15, 7]
    ]);
  });
});
