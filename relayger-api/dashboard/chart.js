// Line charts on a <canvas>, drawn from the server's own figures: no
// library, nothing fetched. Each chart also states its figures as text
// (its legend), so a reader without the picture, or a test, has them.

const COLORS = {
  claimed: '#2b59c3',
  answered: '#067647',
  failed: '#b42318',
  skipped: '#b54708',
  median: '#2b59c3',
  longest: '#7a5af8',
};

const PAD = { left: 44, right: 12, top: 10, bottom: 22 };

/** The smallest round number at or above `value` (1, 2, 5 × 10^n). */
function roundUp(value) {
  if (value <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

const clock = (at) => at.slice(11, 16);

/**
 * Draws `series` ([{ name, values: (number|null)[] }]) over `times` (one
 * RFC 3339 minute each) into the figure's canvas, and writes its legend:
 * one entry a series with its total (or, with `summary`, its own figure).
 * `integers`: counts, so no gridline between whole numbers.
 */
export function drawChart(figure, { times, series, unit = '', summary, integers = false }) {
  const canvas = figure.querySelector('canvas');
  const legend = figure.querySelector('.legend');
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth || 480;
  const height = canvas.clientHeight || 160;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  const ctx = canvas.getContext('2d');
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, width, height);

  const all = series.flatMap((s) => s.values).filter((v) => v !== null);
  const top = roundUp(Math.max(0, ...all));
  const plotW = width - PAD.left - PAD.right;
  const plotH = height - PAD.top - PAD.bottom;
  const x = (i) => PAD.left + (times.length <= 1 ? 0 : (i * plotW) / (times.length - 1));
  const y = (v) => PAD.top + plotH - (v / top) * plotH;

  ctx.font = '11px system-ui, sans-serif';
  ctx.lineWidth = 1;
  ctx.strokeStyle = '#d9dee7';
  ctx.fillStyle = '#667085';
  ctx.textAlign = 'right';
  ctx.textBaseline = 'middle';
  for (const fraction of [0, 0.5, 1]) {
    const value = top * fraction;
    if (integers && !Number.isInteger(value)) continue;
    ctx.beginPath();
    ctx.moveTo(PAD.left, y(value));
    ctx.lineTo(width - PAD.right, y(value));
    ctx.stroke();
    ctx.fillText(`${Number.isInteger(value) ? value : value.toFixed(1)}${unit}`, PAD.left - 4, y(value));
  }
  ctx.textBaseline = 'top';
  const marks = times.length > 0 ? [0, Math.floor((times.length - 1) / 2), times.length - 1] : [];
  marks.forEach((i, n) => {
    ctx.textAlign = n === 0 ? 'left' : n === 2 ? 'right' : 'center';
    ctx.fillText(`${clock(times[i])}Z`, x(i), height - PAD.bottom + 6);
  });

  for (const s of series) {
    const color = COLORS[s.name] ?? '#1d2330';
    ctx.strokeStyle = color;
    ctx.fillStyle = color;
    ctx.lineWidth = 1.6;
    ctx.beginPath();
    let drawing = false;
    s.values.forEach((v, i) => {
      if (v === null) {
        drawing = false;
        return;
      }
      if (drawing) ctx.lineTo(x(i), y(v));
      else ctx.moveTo(x(i), y(v));
      drawing = true;
    });
    ctx.stroke();
    // A dot on every non-zero figure, so a lone minute shows.
    s.values.forEach((v, i) => {
      if (v === null || v === 0) return;
      ctx.beginPath();
      ctx.arc(x(i), y(v), 2.5, 0, Math.PI * 2);
      ctx.fill();
    });
  }

  const points = series.reduce((n, s) => n + s.values.filter((v) => v !== null && v > 0).length, 0);
  figure.dataset.points = String(points);
  legend.replaceChildren(
    ...series.map((s) => {
      const values = s.values.filter((v) => v !== null);
      const total = values.reduce((a, b) => a + b, 0);
      const item = document.createElement('span');
      item.className = 'series';
      item.dataset.series = s.name;
      item.dataset.total = String(total);
      item.dataset.points = String(values.filter((v) => v > 0).length);
      const swatch = document.createElement('i');
      swatch.className = `swatch ${s.name}`;
      item.append(swatch, summary ? summary(s, values) : `${s.name} ${total}`);
      return item;
    }),
  );
}
