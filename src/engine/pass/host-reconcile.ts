// Host reconcile (Host 調解迴圈): retry pending host retirements, confirm lost backup fences, retire
// scripts the store no longer owns. Its rules land with the retirement and fencing work; until then
// the lane reports that it did nothing.
import type {Lane} from './lane.js'

export const hostReconcileLane: Lane = async (run) => {
  run.skip('no host reconcile rules are installed yet')
}
