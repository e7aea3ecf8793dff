export { CallbridgeExporter } from './exporter.js';
export { createSpanCodec, estimateSpanBytes } from './span-codec.js';
