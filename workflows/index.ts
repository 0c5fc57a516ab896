/** Every workflow the worker runs. */
export { harvestWorkflow } from './harvest.js';
