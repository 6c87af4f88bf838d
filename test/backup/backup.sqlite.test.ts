import {backupAndRestoreSuite} from './backup-suite.js'

backupAndRestoreSuite('sqlite')
