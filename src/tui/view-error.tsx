// What the status view shows when the view itself fails: one line, never a stack trace.
import {useApp, useInput} from 'ink'
import {Component, type ReactNode} from 'react'
import {firstLineOf} from './format.js'
import {Lines} from './terminal.js'

/** A bug in the view must not leave a stack trace on the operator's screen: one line, and q still quits. */
export class ViewErrorBoundary extends Component<{children: ReactNode}, {error: string | null}> {
  override state = {error: null as string | null}

  static getDerivedStateFromError(error: unknown): {error: string} {
    return {error: firstLineOf(error)}
  }

  override render(): ReactNode {
    return this.state.error === null ? this.props.children : <BrokenView error={this.state.error} />
  }
}

function BrokenView({error}: {error: string}): ReactNode {
  const {exit} = useApp()
  useInput((input, key) => {
    if (input === 'q' || (key.ctrl && input === 'c')) exit()
  })
  return <Lines lines={[{text: `the status view failed: ${error} (run with EDGEWORKERS_DEBUG=1 and report it); press q to quit`, color: 'red', bold: true}]} />
}
