import {fenceCommandsSuite} from './cli-suite.js'

fenceCommandsSuite('sqlite')
