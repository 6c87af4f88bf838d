import {backupAndRestoreSuite} from './backup-suite.js'

backupAndRestoreSuite('postgres')
