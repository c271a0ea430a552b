/* vramscope HTML report: draws the charts from the JSON block with the embedded plotly.
   Labels arrive HTML-escaped (plotly reads a small HTML subset in its text). */
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('vramscope-data').textContent);
  var UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  var COLORS = [
    '#1f77b4',
    '#ff7f0e',
    '#2ca02c',
    '#d62728',
    '#9467bd',
    '#8c564b'
  ];
  var config = { displaylogo: false, responsive: true };

  function fmt(n, signed) {
    var sign = n < 0 ? '-' : signed && n > 0 ? '+' : '';
    var size = Math.abs(n);
    var unit = 0;
    while (size >= 1024 && unit < UNITS.length - 1) {
      size /= 1024;
      unit++;
    }
    return sign + (unit === 0 ? size : size.toFixed(1)) + ' ' + UNITS[unit];
  }

  /* Bytes in the unit the chart's axis reads in (chosen from its data: data.axes). */
  function scaled(chart) {
    var div = data.axes[chart].div;
    return function (v) {
      return v / div;
    };
  }

  function date(t) {
    return new Date((data.t0 + t) * 1000);
  }

  /* A byte axis whose ticks read "1.5 GiB", "512 MiB": never "15k MiB". */
  function byteAxis(chart, extra) {
    return unitAxis(data.axes[chart], extra);
  }

  /* An axis in ``unit`` ({unit, div}: the data divided by div). */
  function unitAxis(unit, extra) {
    var axis = {
      ticksuffix: ' ' + unit.unit,
      exponentformat: 'none',
      tickformat: '~r',
      separatethousands: false
    };
    return Object.assign(axis, extra || {});
  }

  function layout(extra) {
    return Object.assign(
      {
        margin: { l: 60, r: 20, t: 10, b: 40 },
        legend: { orientation: 'h', y: -0.2 },
        hovermode: 'closest'
      },
      extra
    );
  }

  function timeline(el) {
    var traces = data.lines.map(function (line, i) {
      return {
        type: 'scatter',
        mode: 'lines',
        name: line.device + ' ' + line.field,
        x: line.t.map(date),
        y: line.v.map(scaled('timeline')),
        text: line.v.map(function (v) {
          return fmt(v);
        }),
        hovertemplate: '%{text}<extra>%{fullData.name}</extra>',
        line: {
          width: 1.5,
          color: COLORS[Math.floor(i / 2) % COLORS.length],
          dash: line.field === 'used' ? 'solid' : 'dot'
        }
      };
    });
    var shapes = data.cells.map(function (c, i) {
      return {
        type: 'rect',
        xref: 'x',
        yref: 'paper',
        x0: date(c.start),
        x1: date(Math.max(c.end, c.start + 0.05)),
        y0: 0,
        y1: 1,
        line: { width: 0 },
        fillcolor: c.ok ? (i % 2 ? '#9aa5b1' : '#b8c2cc') : '#e57373',
        opacity: 0.25,
        layer: 'below'
      };
    });
    traces.push({
      type: 'scatter',
      mode: 'markers',
      name: 'cells',
      x: data.cells.map(function (c) {
        return date((c.start + c.end) / 2);
      }),
      y: data.cells.map(function () {
        return 1;
      }),
      yaxis: 'y2',
      marker: { size: 6, color: '#59636e' },
      text: data.cells.map(cellText),
      hovertemplate: '%{text}<extra></extra>'
    });
    Plotly.newPlot(
      el,
      traces,
      layout({
        xaxis: { type: 'date', title: { text: 'time' } },
        yaxis: byteAxis('timeline', { rangemode: 'tozero' }),
        yaxis2: {
          overlaying: 'y',
          range: [0, 1.05],
          visible: false,
          fixedrange: true
        },
        shapes: shapes
      }),
      config
    );
  }

  function cellText(c) {
    var parts = [c.label + ' ' + c.head];
    Object.keys(c.dev).forEach(function (d) {
      parts.push(
        d +
          ': delta ' +
          fmt(c.dev[d][0], true) +
          ', peak ' +
          fmt(c.dev[d][1], true)
      );
    });
    return parts.join('<br>');
  }

  function cells(el) {
    var traces = [];
    data.devices.forEach(function (device, i) {
      var has = data.cells.filter(function (c) {
        return device in c.dev;
      });
      if (!has.length) {
        return;
      }
      [0, 1].forEach(function (k) {
        traces.push({
          type: 'bar',
          name: device + (k ? ' peak' : ' delta'),
          x: has.map(function (c) {
            return c.label;
          }),
          y: has.map(function (c) {
            return scaled('cells')(c.dev[device][k]);
          }),
          text: has.map(cellText),
          textposition: 'none',
          hovertemplate: '%{text}<extra></extra>',
          marker: { color: COLORS[i % COLORS.length], opacity: k ? 0.45 : 1 }
        });
      });
    });
    Plotly.newPlot(
      el,
      traces,
      layout({
        barmode: 'group',
        xaxis: { type: 'category', title: { text: 'cell' } },
        yaxis: byteAxis('cells')
      }),
      config
    );
  }

  function layers(el) {
    var rows = data.layers.slice().reverse();
    var names = rows.map(function (l) {
      return l.path;
    });
    var text = rows.map(function (l) {
      return (
        l.path +
        ' (' +
        l.type +
        ')<br>peak ' +
        fmt(l.peak) +
        ', now ' +
        fmt(l.saved)
      );
    });
    el.style.height = Math.max(240, 28 * rows.length + 80) + 'px';
    Plotly.newPlot(
      el,
      ['peak', 'saved'].map(function (key, k) {
        return {
          type: 'bar',
          orientation: 'h',
          name: k ? 'saved now' : 'peak saved',
          y: names,
          x: rows.map(function (l) {
            return scaled('layers')(l[key]);
          }),
          text: text,
          textposition: 'none',
          hovertemplate: '%{text}<extra></extra>',
          marker: { color: COLORS[k] }
        };
      }),
      layout({
        barmode: 'group',
        margin: { l: 200, r: 20, t: 10, b: 40 },
        yaxis: { type: 'category', automargin: true },
        xaxis: byteAxis('layers')
      }),
      config
    );
  }

  function breakdown(el) {
    var devices = Object.keys(data.breakdown);
    var parts = [
      'parameters',
      'gradients',
      'optimizer_state',
      'activations',
      'runtime',
      'other'
    ];
    var names = {
      optimizer_state: 'optimizer state',
      runtime: 'torch runtime'
    };
    Plotly.newPlot(
      el,
      parts.map(function (part, k) {
        return {
          type: 'bar',
          name: names[part] || part,
          x: devices,
          y: devices.map(function (d) {
            return scaled('breakdown')(data.breakdown[d][part]);
          }),
          text: devices.map(function (d) {
            return fmt(data.breakdown[d][part]);
          }),
          textposition: 'none',
          hovertemplate: '%{x}: %{text}<extra>%{fullData.name}</extra>',
          marker: { color: COLORS[k % COLORS.length] }
        };
      }),
      layout({ barmode: 'stack', yaxis: byteAxis('breakdown') }),
      config
    );
  }

  /* vramscope compare: one device's cells, old peak next to new (data.compare[key]). */
  function compare(el, key) {
    var side = data.compare[key];
    var div = side.axis.div;
    Plotly.newPlot(
      el,
      ['old', 'new'].map(function (name, k) {
        return {
          type: 'bar',
          name: name + ' peak',
          x: side.labels,
          y: side[name].map(function (v) {
            return v / div;
          }),
          text: side[name].map(function (v) {
            return fmt(v, true);
          }),
          textposition: 'none',
          hovertemplate: '%{x} ' + name + ': %{text}<extra></extra>',
          marker: { color: COLORS[k] }
        };
      }),
      layout({
        barmode: 'group',
        xaxis: { type: 'category', title: { text: 'cell' } },
        yaxis: unitAxis(side.axis)
      }),
      config
    );
  }

  var draw = {
    timeline: timeline,
    cells: cells,
    layers: layers,
    breakdown: breakdown
  };
  document.querySelectorAll('[data-chart]').forEach(function (el) {
    var key = el.getAttribute('data-chart');
    try {
      if (data.compare && key in data.compare) {
        compare(el, key);
      } else {
        draw[key](el);
      }
    } catch (e) {
      el.textContent = 'This chart could not be drawn: ' + e;
    }
  });
})();
