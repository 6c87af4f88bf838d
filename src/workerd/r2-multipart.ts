// Multipart uploads, as methods of the bucket object of the R2 service Worker (./r2-worker.ts,
// whose source this is part of): parts are stored like objects' bytes (chunks under a blob of their
// own), and completing an upload moves the chosen parts' chunks into the object's blob, in part
// order, without copying them. R2's rules hold: every part but the last is at least 5 MiB and all
// of those are one length; the etag is the MD5 of the parts' MD5s and how many parts there are.
export const R2_MULTIPART_SOURCE = `createMultipartUpload(bucket, call) {
    const custom = customMetadataOf(call.customFields);
    checkKey(call.object);
    checkMetadataSize(custom);
    const uploadId = randomId();
    this.ctx.storage.transactionSync(() => {
      this.recordBucket(bucket);
      this.sql.exec(
        "INSERT INTO uploads (upload_id, key, http_metadata, custom_metadata, state) VALUES (?, ?, ?, ?, ?)",
        uploadId, call.object, JSON.stringify(call.httpFields ?? {}), JSON.stringify(custom), UPLOAD.inProgress,
      );
    });
    return resultResponse({uploadId});
  }

  upload(call) {
    return this.sql.exec("SELECT http_metadata, custom_metadata, state FROM uploads WHERE upload_id = ? AND key = ?", call.uploadId, call.object).toArray()[0];
  }

  async uploadPart(call, value) {
    const stored = await this.storeBlob(value, ["MD5"]);
    try {
      checkKey(call.object);
      if (stored.size > LIMITS.valueBytes) throw refuse.tooLarge();
      const etag = randomHex(16);
      const previous = this.ctx.storage.transactionSync(() => {
        if (this.upload(call)?.state !== UPLOAD.inProgress) throw refuse.noSuchUpload();
        const previous = this.sql.exec("SELECT blob FROM parts WHERE upload_id = ? AND part_number = ?", call.uploadId, call.partNumber).toArray()[0];
        this.sql.exec(
          "INSERT OR REPLACE INTO parts (upload_id, part_number, blob, size, etag, md5) VALUES (?, ?, ?, ?, ?, ?)",
          call.uploadId, call.partNumber, stored.blob, stored.size, etag, stored.digests.get("MD5"),
        );
        return previous;
      });
      if (previous) this.dropBlob(previous.blob);
      return resultResponse({etag});
    } catch (error) {
      this.dropBlob(stored.blob);
      throw error;
    }
  }

  // The parts an upload completes with, in part order, checked as R2 checks them.
  completion(call) {
    const upload = this.upload(call);
    if (upload === undefined) throw refuse.internal();
    if (upload.state !== UPLOAD.inProgress) throw refuse.noSuchUpload();
    const numbers = new Set();
    for (const {part} of call.parts ?? []) {
      if (numbers.has(part)) throw refuse.internal();
      numbers.add(part);
    }
    const uploaded = new Map(this.sql.exec("SELECT part_number, blob, size, etag, md5 FROM parts WHERE upload_id = ?", call.uploadId).toArray().map((part) => [part.part_number, part]));
    const parts = (call.parts ?? []).map(({part, etag}) => {
      const stored = uploaded.get(part);
      if (stored?.etag !== etag) throw refuse.invalidPart();
      return stored;
    });
    if (parts.slice(0, -1).some((part) => part.size < LIMITS.minPartBytes)) throw refuse.tooSmall();
    parts.sort((a, b) => a.part_number - b.part_number);
    const length = parts[0]?.size;
    if (parts.slice(0, -1).some((part) => part.size !== length) || (parts.length > 1 && parts.at(-1).size > length)) throw refuse.badUpload();
    return {upload, parts};
  }

  async completeMultipartUpload(bucket, call) {
    checkKey(call.object);
    const {parts} = this.completion(call);
    // R2's multipart etag: the MD5 of the parts' MD5s, and how many parts.
    const md5s = Uint8Array.from(parts.flatMap((part) => part.md5.match(/../g).map((byte) => parseInt(byte, 16))));
    const etag = hex(await crypto.subtle.digest("MD5", md5s)) + "-" + parts.length;
    const {row, dropped} = this.ctx.storage.transactionSync(() => {
      const {upload, parts: now} = this.completion(call);
      if (now.map((part) => part.blob).join() !== parts.map((part) => part.blob).join()) throw refuse.badUpload();
      const blob = randomId();
      let size = 0;
      for (const part of now) {
        this.sql.exec("UPDATE chunks SET blob = ?, start = start + ? WHERE blob = ?", blob, size, part.blob);
        size += part.size;
      }
      const unused = this.sql.exec("DELETE FROM parts WHERE upload_id = ? RETURNING blob", call.uploadId).toArray().map((part) => part.blob);
      this.sql.exec("UPDATE uploads SET state = ? WHERE upload_id = ?", UPLOAD.completed, call.uploadId);
      const row = {
        key: call.object, blob, version: randomHex(16), size, etag, uploaded: Date.now(), checksums: "{}",
        http_metadata: upload.http_metadata, custom_metadata: upload.custom_metadata,
      };
      const previous = this.row(row.key);
      this.recordBucket(bucket);
      this.writeRow(row);
      return {row, dropped: [...unused, ...(previous ? [previous.blob] : [])]};
    });
    for (const blob of dropped) this.dropBlob(blob);
    return resultResponse(wireObject(row));
  }

  abortMultipartUpload(call) {
    checkKey(call.object);
    const dropped = this.ctx.storage.transactionSync(() => {
      const upload = this.upload(call);
      if (upload === undefined) throw refuse.internal();
      if (upload.state !== UPLOAD.inProgress) return [];
      this.sql.exec("UPDATE uploads SET state = ? WHERE upload_id = ?", UPLOAD.aborted, call.uploadId);
      return this.sql.exec("DELETE FROM parts WHERE upload_id = ? RETURNING blob", call.uploadId).toArray().map((part) => part.blob);
    });
    for (const blob of dropped) this.dropBlob(blob);
    return resultResponse(undefined);
  }`
