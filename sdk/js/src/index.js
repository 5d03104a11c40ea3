// @relayger/sdk: a client for Relayger servers and the persistent assistant
// listener (runWorker) with the product page's names.

export { Relayger } from './client.js';
export { RelaygerError, SealedOpenError } from './errors.js';
export { profileDir } from './profile.js';
export { uuidv7 } from './util.js';
export { runWorker } from './worker.js';
