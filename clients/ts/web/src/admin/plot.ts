// Live line plots on a canvas: a fixed window of recent samples per series, rescaled to the
// largest value shown, redrawn whole on every sample (a few hundred points: cheap).

/** Samples kept per series: two minutes at one a second. */
export const WINDOW = 120;

export class Series {
  readonly values: number[] = [];

  push(value: number): void {
    this.values.push(Number.isFinite(value) ? value : 0);
    if (this.values.length > WINDOW) {
      this.values.shift();
    }
  }
}

/** Draws `series` (each in its colour) over the canvas, with the scale's top value written in the corner. */
export function drawPlot(canvas: HTMLCanvasElement, series: readonly { series: Series; color: string }[]): void {
  const context = canvas.getContext("2d");
  if (context === null) {
    return;
  }
  const { width, height } = canvas;
  context.clearRect(0, 0, width, height);
  const top = Math.max(1e-9, ...series.flatMap(({ series }) => series.values));
  context.lineWidth = 1.5;
  for (const { series: line, color } of series) {
    context.strokeStyle = color;
    context.beginPath();
    line.values.forEach((value, i) => {
      const x = (i / (WINDOW - 1)) * width;
      const y = height - 2 - (value / top) * (height - 14);
      if (i === 0) context.moveTo(x, y);
      else context.lineTo(x, y);
    });
    context.stroke();
  }
  context.fillStyle = "#9aa3b5";
  context.font = "10px ui-monospace, monospace";
  context.fillText(formatNumber(top), 4, 10);
}

/** 1234567 → "1.23 M": the figures the page shows. */
export function formatNumber(value: number): string {
  const abs = Math.abs(value);
  if (abs >= 1e9) return `${(value / 1e9).toFixed(2)} G`;
  if (abs >= 1e6) return `${(value / 1e6).toFixed(2)} M`;
  if (abs >= 1e3) return `${(value / 1e3).toFixed(1)} k`;
  return abs >= 10 || value === 0 ? value.toFixed(0) : value.toFixed(2);
}
