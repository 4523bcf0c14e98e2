import { startRouter } from './router.js';

startRouter();
