/** A machine display's size in pixels. */
export interface ScreenSize {
  width: number;
  height: number;
}

/** 1280×800 unless asked at create, within 640×480 and 1920×1200. */
export const DEFAULT_SCREEN: ScreenSize = { width: 1280, height: 800 };
export const SCREEN_LIMITS = { min: { width: 640, height: 480 }, max: { width: 1920, height: 1200 } } as const;
