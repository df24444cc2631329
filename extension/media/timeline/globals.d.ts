// Types for the timeline's plain-JS scripts (checked by extension/media/tsconfig.json).
// model.js, view.js and main.js share globals (loaded as separate <script>s);
// add a member here when one of them exports something new.

type TimelineFn = (...args: any[]) => any;

/** model.js: pure functions over the `trainiumLens/timeline` payload. */
interface TimelineModelApi {
  lowerBound: TimelineFn;
  buildModel: TimelineFn;
  setHighlight: TimelineFn;
  isHighlighted: TimelineFn;
  visitTrack: TimelineFn;
  hitTest: TimelineFn;
  initialView: TimelineFn;
  zoom: TimelineFn;
  pan: TimelineFn;
  ticks: TimelineFn;
  formatUs: (us: number) => string;
  describe: TimelineFn;
  hue: (name: string) => number;
}

/** view.js: the canvas. */
interface TimelineViewApi {
  create: TimelineFn;
  GUTTER_W: number;
  AXIS_H: number;
  ROW_H: number;
}

declare var TimelineModel: TimelineModelApi;
declare var TimelineView: TimelineViewApi;
/** main.js: the live view, for the e2e test and the benchmark. */
declare var lensTimeline: any;
/** main.js: the benchmark page feeds a payload directly. */
declare var showTimelineData: (data: unknown) => void;

/** The webview API VS Code injects (absent when the page is opened on its own). */
declare function acquireVsCodeApi(): {
  postMessage(message: unknown): void;
  getState(): unknown;
  setState(state: unknown): void;
};
