/**
 * "@capstan/shared/s3": S3 access for backups (agent) and storage checks (control plane), kept
 * out of the main entry so zod-only users do not load the AWS SDK.
 */
export { s3Client, describeS3Error, ALLOW_PRIVATE_SETTING, S3_TIMEOUTS, type S3Handle, type S3Timeouts } from "./client.js";
export { testS3, uploadS3, downloadS3, deleteS3, listS3, S3Error, PART_SIZE, QUEUE_SIZE } from "./operations.js";
export { UploadBeside, fanOut } from "./upload-beside.js";
