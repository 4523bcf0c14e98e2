import './reauth.js';
import { startRouter } from './router.js';

startRouter();
