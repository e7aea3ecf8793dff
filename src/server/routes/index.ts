/** Every route module of the server, registered in this order by `app.ts`. */
import type { RouteModule } from '../context.js';
import { callsRoutes } from './calls.js';
import { costsRoutes } from './costs.js';
import { feedbackRoutes } from './feedback.js';
import { filesRoutes } from './files.js';
import { objectsRoutes } from './objects.js';
import { otlpRoutes } from './otlp.js';
import { refsRoutes } from './refs.js';
import { tablesRoutes } from './tables.js';
import { threadsRoutes } from './threads.js';

export const ROUTE_MODULES: readonly RouteModule[] = [
  callsRoutes,
  objectsRoutes,
  feedbackRoutes,
  costsRoutes,
  filesRoutes,
  otlpRoutes,
  tablesRoutes,
  refsRoutes,
  threadsRoutes,
];
