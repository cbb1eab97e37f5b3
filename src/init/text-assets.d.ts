/** The starter policy's files, imported as text (`with { type: "text" }`): the import is the file's content. */
declare module "*.rules" {
  const text: string;
  export default text;
}
/** See above. */
declare module "*/starter.toml" {
  const text: string;
  export default text;
}
