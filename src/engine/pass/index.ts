// Reconcile passes: the lanes, the runner, the watch loop and the metrics textfile.
export {LANE_NAMES, type DispatchDeploy, type LaneName, type LaneSummary, type RowDoneEvent} from './lane.js'
export {runPass, type PassOptions, type PassResult} from './run-pass.js'
export {watchPasses, type WatchOptions} from './watch.js'
export {assertMetricsFileWritable, writeMetricsFile} from './metrics.js'
