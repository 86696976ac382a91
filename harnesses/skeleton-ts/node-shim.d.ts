// The few Node 20 APIs the skeleton uses, declared here so that `tsc` needs no
// @types/node (the skeleton has no dependencies at all).
declare module "node:fs" {
  interface Stats { isFile(): boolean; isDirectory(): boolean; size: number }
  export function lstatSync(path: string): Stats;
  export function readFileSync(path: string): Uint8Array;
  export function realpathSync(path: string): string;
}
declare module "node:path" {
  export function resolve(...parts: string[]): string;
  export function isAbsolute(path: string): boolean;
}
declare module "node:readline" {
  interface Interface { on(event: "line", listener: (line: string) => void): void }
  export function createInterface(options: { input: unknown; terminal: boolean }): Interface;
}
declare const process: {
  stdin: unknown;
  stdout: { write(text: string): boolean };
};
declare function performanceNow(): number;
declare class TextDecoder {
  constructor(label: string, options?: { fatal: boolean });
  decode(bytes: Uint8Array): string;
}
