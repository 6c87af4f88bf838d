// oclif behind a module of our own: a dynamic import() of @oclif/core (CommonJS) from the bundle
// would see only its default export.
export {execute} from '@oclif/core'
