/** The shells build.ts stages for embedding (`with { type: "file" }`): the import is the asset's path. */
declare module "*/embed/bash" {
  const path: string;
  export default path;
}
/** See above. */
declare module "*/embed/zsh" {
  const path: string;
  export default path;
}
declare module "*/embed/room-launcher" {
  const path: string;
  export default path;
}
declare module "*/embed/sandbox-exec" {
  const path: string;
  export default path;
}
