// oclif behind a module of our own: a dynamic import() of @oclif/core (CommonJS) from the bundle
// would see only its default export. The CLI imports oclif's parts (@oclif/core/execute, /command,
// /flags, /args, /errors), never its index: that one loads every part, and semver for an engines
// check that finds no package.json inside the bundle, at every start.
export {execute} from '@oclif/core/execute'
