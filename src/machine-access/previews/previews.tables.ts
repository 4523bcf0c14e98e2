/** A port of a machine made public: its preview answers anyone. Ports without a row are private. */
export interface PublicPreviewPortsTable {
  machine_id: string;
  port: number;
  created_at: number;
}
