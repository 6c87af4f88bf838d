// An upload's department: optional (a kit that predates it sends none), and only a department id.
import {describe, expect, test} from 'vitest'
import {uploadScriptSchema, type UploadScript} from '../../../src/protocol/management-api.js'

const upload: UploadScript = {
  releaseGeneration: '0123456789abcdef0123456789abcdef',
  mainModule: 'index.js',
  compatibilityDate: '2026-01-01',
  builderPolicy: 'department-worker-project-v2.0',
  modules: [{name: 'index.js', contentBase64: Buffer.from('export default {}').toString('base64')}],
}

describe('upload department', () => {
  test('is the kit department id when given, null when not', () => {
    expect(uploadScriptSchema.parse({...upload, department: 'acme-sales'}).department).toBe('acme-sales')
    expect(uploadScriptSchema.parse(upload).department).toBeNull()
  })

  test('is refused when it is not a department id (it becomes a metrics label)', () => {
    for (const department of ['', 'acme sales', '-acme', 'a'.repeat(65), 'acme"}']) {
      const result = uploadScriptSchema.safeParse({...upload, department})
      expect(result.success, department).toBe(false)
      expect(result.error?.issues[0]?.path, department).toEqual(['department'])
    }
  })
})
