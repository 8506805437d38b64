// The server's JSON endpoints (docs/ui.md): views, brush tallies, details pages.

export type Label = string | number | boolean | null;

export interface ViewInfo {
  id: string;
  name: string;
  source: string;
  keys: string[];
  kind: "bar" | "heat";
  labels: Label[][];
  count: number[];
  measure: string | null;
  sum?: number[];
}

export interface Tally {
  count: number[];
  sum?: number[];
}

export interface BrushResult {
  view: string;
  groups: number[];
  rows: number;
  views: Record<string, Tally>;
  server_ms: number;
}

export interface RowsPage {
  total: number;
  offset: number;
  columns: string[];
  rows: Label[][];
}

async function post<T>(url: string, body: object): Promise<T> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const data = await response.json();
  if (!response.ok) throw new Error(data.error ?? response.statusText);
  return data as T;
}

export async function views(): Promise<ViewInfo[]> {
  const response = await fetch("/api/views");
  return (await response.json()).views as ViewInfo[];
}

export const brush = (view: string, groups: number[]) => post<BrushResult>("/api/brush", { view, groups });

export const rows = (view: string, groups: number[], offset: number, limit: number) =>
  post<RowsPage>("/api/rows", { view, groups, offset, limit });
