// Usage: node hub_download.mjs ENDPOINT CACHE_DIR REPO REVISION FILE...
// Downloads each FILE of REPO at REVISION into the Hugging Face cache CACHE_DIR with @huggingface/hub's
// downloadFileToCacheDir (the JS client's writer of the huggingface_hub cache layout: blobs/<etag>,
// snapshots/<commit>/<file> -> ../../blobs/<etag>), talking to ENDPOINT (the tests' local Hub). Prints the
// pointer paths as a JSON array. HF_TOKEN, when set, is passed as the access token.
import { downloadFileToCacheDir } from '@huggingface/hub';

const [endpoint, cacheDir, repo, revision, ...files] = process.argv.slice(2);
if (!endpoint || !cacheDir || !repo || !revision || files.length === 0) {
  process.stderr.write('usage: node hub_download.mjs ENDPOINT CACHE_DIR REPO REVISION FILE...\n');
  process.exit(2);
}
console.debug = () => {}; // the library logs each download on stdout's neighbour; keep stdout JSON only
const out = [];
for (const path of files) {
  out.push(await downloadFileToCacheDir({
    repo, path, revision, cacheDir, hubUrl: endpoint,
    accessToken: process.env.HF_TOKEN || undefined,
  }));
}
process.stdout.write(JSON.stringify(out));
