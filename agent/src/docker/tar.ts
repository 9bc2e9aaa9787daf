/**
 * A tar archive holding one regular file, the form the engine's PUT /containers/{id}/archive
 * takes. Written by hand because it is 512-byte header + data + padding, and it keeps the
 * agent from depending on a tar library's filesystem-oriented API for an in-memory file.
 */
export function singleFileTar(name: string, content: Buffer, mode = 0o600): Buffer {
  if (!/^[A-Za-z0-9._-]{1,100}$/.test(name)) throw new Error(`tar: unsupported file name ${JSON.stringify(name)}`);
  const header = Buffer.alloc(512, 0);
  const put = (offset: number, length: number, value: string) => header.write(value, offset, length, "ascii");
  const octal = (n: number, width: number) => n.toString(8).padStart(width - 1, "0") + "\0";
  put(0, 100, name);
  put(100, 8, octal(mode, 8));
  put(108, 8, octal(0, 8)); // uid root
  put(116, 8, octal(0, 8)); // gid root
  put(124, 12, octal(content.length, 12));
  put(136, 12, octal(Math.floor(Date.now() / 1000), 12));
  put(148, 8, "        "); // checksum is computed with this field as spaces
  put(156, 1, "0"); // regular file
  put(257, 6, "ustar\0");
  put(263, 2, "00");
  let sum = 0;
  for (const b of header) sum += b;
  put(148, 8, sum.toString(8).padStart(6, "0") + "\0 ");
  const padding = Buffer.alloc((512 - (content.length % 512)) % 512, 0);
  return Buffer.concat([header, content, padding, Buffer.alloc(1024, 0)]);
}
