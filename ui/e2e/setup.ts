// Once per e2e run: an empty screenshots folder.
export { setup } from './harness'
